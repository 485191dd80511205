// The tokenizer of a container checked against its manifest's config:
// shared by Model::Open and ContainerTokenizer::Open so both refuse the
// same files. nullptr (not an error) when the container has none.
#pragma once

#include <memory>
#include <string>

#include "model/model_config.h"
#include "waste/status.h"

namespace waste {

class Tokenizer;
Result<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const std::string& dir,
                                                      const ModelConfig& cfg);

}  // namespace waste
