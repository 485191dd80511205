# Turns server/web/index.html into a C++ source holding it as a raw string
# (run at build time: cmake -DIN=... -DOUT=... -P embed.cmake).
file(READ "${IN}" content)
string(FIND "${content}" ")WASTEPAGE\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )WASTEPAGE\"")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from server/web/index.html by server/web/embed.cmake. Do not edit.\n"
  "#include \"web_page.h\"\n\n"
  "namespace waste::server {\n\n"
  "std::string_view ChatPageHtml() {\n"
  "  static constexpr char kPage[] = R\"WASTEPAGE(${content})WASTEPAGE\";\n"
  "  return {kPage, sizeof(kPage) - 1};\n"
  "}\n\n"
  "}  // namespace waste::server\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
