#include "grammar_option.h"


#include "waste/files.h"

namespace waste::cli {

Result<std::shared_ptr<const Grammar>> LoadGrammarOption(const Options& o) noexcept {
  const bool schema = !o.json_schema_file.empty();
  const std::string& path = schema ? o.json_schema_file : o.grammar_file;
  if (path.empty()) return std::shared_ptr<const Grammar>();
  const std::string flag = schema ? "--json-schema " : "--grammar ";
  // The one file-reading rule (waste/files.h): a regular file, size-capped.
  Result<std::string> read = ReadRegularFile(path, kMaxPromptFileBytes, flag + "file");
  if (!read) return IoError(read.error().message());
  const std::string& text = *read;
  Result<std::shared_ptr<const Grammar>> g =
      schema ? Grammar::FromJsonSchema(text) : Grammar::Parse(text);
  // A grammar the user wrote is a bad argument, not a bad container.
  if (!g) {
    Errc code = g.error().code() == Errc::kFormat ? Errc::kArg : g.error().code();
    return Status(code, flag + path + ": " + g.error().message());
  }
  return g;
}

}  // namespace waste::cli
