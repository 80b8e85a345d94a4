# MEMSNAP_STATIC_DEPS: the C++ libraries from their static archives (.a),
# or in their header-only form where the library has one (included by
# cmake/memsnapDependencies.cmake after every library was found).
#
# Debian ships static archives of abseil, RE2, zstd, zlib and pugixml, but
# none of fmt (its header-only mode is fmt's own), and builds toml++ as a
# shared library (header-only is toml++'s default). xxHash is taken
# header-only too (XXH_INLINE_ALL, the library's documented mode), which
# needs no archive anywhere.

# memsnap_static_archive(VAR NAME): the path of libNAME.a, or stop.
function(memsnap_static_archive var name)
  set(_file ${CMAKE_STATIC_LIBRARY_PREFIX}${name}${CMAKE_STATIC_LIBRARY_SUFFIX})
  find_library(${var} NAMES ${_file})
  if(NOT ${var})
    message(FATAL_ERROR "memsnap: MEMSNAP_STATIC_DEPS needs ${_file}, which this machine lacks")
  endif()
endfunction()

set(MEMSNAP_DEP_FMT fmt::fmt-header-only)
set(MEMSNAP_DEP_ZSTD zstd::libzstd_static)

add_library(memsnap_xxhash_inline INTERFACE)
target_include_directories(memsnap_xxhash_inline INTERFACE ${XXHASH_INCLUDE_DIRS})
target_compile_definitions(memsnap_xxhash_inline INTERFACE XXH_INLINE_ALL)
set(MEMSNAP_DEP_XXHASH memsnap_xxhash_inline)

add_library(memsnap_tomlpp_header_only INTERFACE)
target_include_directories(memsnap_tomlpp_header_only INTERFACE ${TOMLPP_INCLUDE_DIRS})
target_compile_definitions(memsnap_tomlpp_header_only INTERFACE TOML_HEADER_ONLY=1)
set(MEMSNAP_DEP_TOMLPP memsnap_tomlpp_header_only)

if(TARGET pugixml::static)
  set(MEMSNAP_DEP_PUGIXML pugixml::static)
else()
  memsnap_static_archive(MEMSNAP_PUGIXML_ARCHIVE pugixml)
  add_library(memsnap_pugixml_static INTERFACE)
  target_include_directories(memsnap_pugixml_static INTERFACE ${PUGIXML_INCLUDE_DIRS})
  target_link_libraries(memsnap_pugixml_static INTERFACE ${MEMSNAP_PUGIXML_ARCHIVE})
  set(MEMSNAP_DEP_PUGIXML memsnap_pugixml_static)
endif()

# RE2: its archive in place of the shared library memsnapFindRE2 found.
get_target_property(_re2_location re2::re2 IMPORTED_LOCATION)
if(NOT _re2_location MATCHES "\\.a$")
  memsnap_static_archive(MEMSNAP_RE2_ARCHIVE re2)
  set_target_properties(re2::re2 PROPERTIES IMPORTED_LOCATION "${MEMSNAP_RE2_ARCHIVE}")
endif()

# abseil: its CMake package names shared libraries; pkg-config --static lists
# the archives the modules we use need, in link order. A group lets the
# linker resolve the references between them in any order.
pkg_check_modules(ABSL_STATIC REQUIRED QUIET absl_flat_hash_map absl_flat_hash_set absl_hash
                  absl_btree absl_strings)
set(_absl_archives)
foreach(_name IN LISTS ABSL_STATIC_STATIC_LIBRARIES)
  if(_name MATCHES "^absl_")
    memsnap_static_archive(MEMSNAP_ARCHIVE_${_name} ${_name})
    list(APPEND _absl_archives ${MEMSNAP_ARCHIVE_${_name}})
  endif()
endforeach()
list(REMOVE_DUPLICATES _absl_archives)
add_library(memsnap_absl_static INTERFACE)
target_include_directories(memsnap_absl_static INTERFACE ${ABSL_STATIC_INCLUDE_DIRS})
target_link_libraries(memsnap_absl_static INTERFACE
  "-Wl,--start-group" ${_absl_archives} "-Wl,--end-group" Threads::Threads)
set(MEMSNAP_DEP_ABSL memsnap_absl_static)
set(MEMSNAP_DEP_ABSL_STRINGS memsnap_absl_static)
