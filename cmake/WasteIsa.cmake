# Per-file ISA flags. Only the named file gets the flags, so the rest of the
# build targets the baseline and one binary runs on any CPU of the
# architecture; dispatch.cc picks the best ISA at run time.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  set(WASTE_ARCH_X86_64 ON)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64|ARM64")
  set(WASTE_ARCH_AARCH64 ON)
endif()

# waste_add_isa_source(TARGET FILE FLAGS... ) adds FILE to TARGET with FLAGS on it alone.
function(waste_add_isa_source target file)
  target_sources(${target} PRIVATE ${file})
  set_source_files_properties(${file} TARGET_DIRECTORY ${target}
    PROPERTIES COMPILE_OPTIONS "${ARGN}")
endfunction()
