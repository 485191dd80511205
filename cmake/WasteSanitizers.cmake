# WASTE_SANITIZE=address,undefined (the asan-ubsan preset) instruments every target.
set(WASTE_SANITIZE "" CACHE STRING "Comma-separated -fsanitize= list (empty = none)")
if(WASTE_SANITIZE)
  add_compile_options(-fsanitize=${WASTE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${WASTE_SANITIZE})
endif()
