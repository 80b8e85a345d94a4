# re2::re2, for the core library's regular expressions (src/util/pattern.cc).
# RE2 since 2023 installs a CMake package; Debian bookworm's (2022-06-01)
# installs only a pkg-config file, and a program that links memsnap::core must
# not need pkg-config: the library and its header are found directly there.
# Sets MEMSNAP_RE2_FOUND; the caller decides what a missing RE2 means.
# Included by cmake/memsnapDependencies.cmake and by the installed
# memsnapConfig.cmake.
if(NOT TARGET re2::re2)
  find_package(re2 CONFIG QUIET)
endif()
if(NOT TARGET re2::re2)
  find_library(MEMSNAP_RE2_LIBRARY NAMES re2)
  find_path(MEMSNAP_RE2_INCLUDE_DIR re2/re2.h)
  if(MEMSNAP_RE2_LIBRARY AND MEMSNAP_RE2_INCLUDE_DIR)
    find_package(Threads REQUIRED)
    add_library(re2::re2 UNKNOWN IMPORTED)
    set_target_properties(re2::re2 PROPERTIES
      IMPORTED_LOCATION "${MEMSNAP_RE2_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${MEMSNAP_RE2_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES Threads::Threads)
  endif()
endif()
if(TARGET re2::re2)
  set(MEMSNAP_RE2_FOUND TRUE)
else()
  set(MEMSNAP_RE2_FOUND FALSE)
endif()
