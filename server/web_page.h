// The chat page served at / (server/web/index.html, compiled in).
#pragma once

#include <string_view>

namespace waste::server {

std::string_view ChatPageHtml();

}  // namespace waste::server
