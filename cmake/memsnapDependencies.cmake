# memsnap's C++ libraries, found in one place (included by CMakeLists.txt).
#
# Every library is looked for quietly first; where any is missing, configure
# stops with one message that names all of them and the packages that
# provide them on Debian/Ubuntu, Fedora/RHEL and Homebrew, instead of a CMake
# trace for the first one. Checked this way, a machine without them fails in
# about a second, before anything compiles.
#
# MEMSNAP_STATIC_DEPS links the libraries from their static archives and
# takes the header-only form of those that have one (fmt, toml++, xxHash):
# the static executable of `make dist` (MEMSNAP_STATIC_EXE) needs it, and a
# program built so carries no shared library besides the C and C++ runtimes.
# After this file, the targets to link are in MEMSNAP_DEP_<NAME> variables.

set(_memsnap_missing_names)
set(_memsnap_missing_debian)
set(_memsnap_missing_fedora)
set(_memsnap_missing_brew)

# memsnap_dependency_missing(NAME DEBIAN FEDORA BREW): one missing library.
function(memsnap_dependency_missing name debian fedora brew)
  foreach(list_name IN ITEMS names debian fedora brew)
    set(_list ${_memsnap_missing_${list_name}})
    if(list_name STREQUAL "names")
      list(APPEND _list "${name}")
    else()
      list(APPEND _list "${${list_name}}")
    endif()
    list(REMOVE_DUPLICATES _list)
    set(_memsnap_missing_${list_name} ${_list} PARENT_SCOPE)
  endforeach()
endfunction()

# memsnap_require(FOUND NAME DEBIAN FEDORA BREW): records NAME as missing
# unless FOUND is true.
macro(memsnap_require found name debian fedora brew)
  if(NOT ${found})
    memsnap_dependency_missing("${name}" "${debian}" "${fedora}" "${brew}")
  endif()
endmacro()

# C++20 first: without it nothing else matters.
if(NOT "cxx_std_20" IN_LIST CMAKE_CXX_COMPILE_FEATURES)
  message(FATAL_ERROR
    "memsnap needs a C++20 compiler (GCC 11 or newer, Clang 14 or newer); "
    "${CMAKE_CXX_COMPILER} is ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}.")
endif()

find_package(Threads REQUIRED)
find_package(CLI11 CONFIG QUIET)
memsnap_require(CLI11_FOUND "CLI11" libcli11-dev cli11-devel cli11)
find_package(fmt QUIET)
memsnap_require(fmt_FOUND "fmt" libfmt-dev fmt-devel fmt)
find_package(nlohmann_json 3 QUIET)
memsnap_require(nlohmann_json_FOUND "nlohmann-json" nlohmann-json3-dev json-devel nlohmann-json)
find_package(absl QUIET)
memsnap_require(absl_FOUND "abseil" libabsl-dev abseil-cpp-devel abseil)
if(MEMSNAP_STATIC_DEPS)
  set(ZLIB_USE_STATIC_LIBS ON)
endif()
find_package(ZLIB QUIET)
memsnap_require(ZLIB_FOUND "zlib" zlib1g-dev zlib-devel zlib)
find_package(zstd CONFIG QUIET)
memsnap_require(zstd_FOUND "zstd" libzstd-dev libzstd-devel zstd)
include(${CMAKE_CURRENT_LIST_DIR}/memsnapFindRE2.cmake)
memsnap_require(MEMSNAP_RE2_FOUND "RE2" libre2-dev re2-devel re2)
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  # xxHash: the identity of a summarised file (XXH3-128 of its first MiB).
  pkg_check_modules(XXHASH QUIET IMPORTED_TARGET libxxhash)
  memsnap_require(XXHASH_FOUND "xxHash" libxxhash-dev xxhash-devel xxhash)
  # memsnap check: budget files in TOML (toml++) and JUnit XML (pugixml).
  pkg_check_modules(TOMLPP QUIET IMPORTED_TARGET tomlplusplus)
  memsnap_require(TOMLPP_FOUND "toml++" libtomlplusplus-dev tomlplusplus-devel tomlplusplus)
  pkg_check_modules(PUGIXML QUIET IMPORTED_TARGET pugixml)
  memsnap_require(PUGIXML_FOUND "pugixml" libpugixml-dev pugixml-devel pugixml)
else()
  memsnap_dependency_missing("pkg-config" pkg-config pkgconf-pkg-config pkgconf)
endif()
if(MEMSNAP_BUILD_TESTS AND BUILD_TESTING)
  find_package(GTest QUIET)
  memsnap_require(GTest_FOUND "GoogleTest (for the tests; -DBUILD_TESTING=OFF builds without)"
                  libgtest-dev gtest-devel googletest)
endif()

# The server's transport (src/serve/http.cc) is Asio's event loop and Beast's
# HTTP parser, both header-only: nothing to link, and nothing for a static
# binary or a wheel to carry. Optional unless MEMSNAP_SERVE=ON.
if(NOT MEMSNAP_SERVE STREQUAL "OFF")
  find_package(Boost 1.74 CONFIG QUIET)
endif()
if(MEMSNAP_SERVE STREQUAL "AUTO")
  set(MEMSNAP_WITH_SERVE ${Boost_FOUND})
  if(NOT Boost_FOUND)
    message(STATUS "memsnap serve: off: Boost's headers (1.74 or newer) are missing "
                   "(Debian/Ubuntu: libboost-dev, Fedora/RHEL: boost-devel, Homebrew: boost)")
  endif()
elseif(MEMSNAP_SERVE)
  memsnap_require(Boost_FOUND "Boost headers 1.74 or newer (memsnap serve)"
                  libboost-dev boost-devel boost)
  set(MEMSNAP_WITH_SERVE ON)
else()
  set(MEMSNAP_WITH_SERVE OFF)
endif()

if(_memsnap_missing_names)
  list(JOIN _memsnap_missing_names ", " _names)
  list(JOIN _memsnap_missing_debian " " _debian)
  list(JOIN _memsnap_missing_fedora " " _fedora)
  list(JOIN _memsnap_missing_brew " " _brew)
  message(FATAL_ERROR
    "memsnap: the build needs libraries this machine lacks: ${_names}.\n"
    "Install them, then build again:\n"
    "  Debian/Ubuntu:  sudo apt-get install ${_debian}\n"
    "  Fedora/RHEL:    sudo dnf install ${_fedora}\n"
    "  Homebrew:       brew install ${_brew}\n"
    "(On Debian, scripts/setup installs everything the build and tests need. Without root or "
    "a compiler, take the wheel or the static binary instead: docs/install.md.)")
endif()

# ---- what to link -----------------------------------------------------------
set(MEMSNAP_DEP_ABSL absl::flat_hash_map absl::flat_hash_set absl::hash absl::btree)
set(MEMSNAP_DEP_ABSL_STRINGS absl::strings)
set(MEMSNAP_DEP_FMT fmt::fmt)
# A zstd built static-only (make dist's prefix) has no shared target.
if(TARGET zstd::libzstd_shared)
  set(MEMSNAP_DEP_ZSTD zstd::libzstd_shared)
else()
  set(MEMSNAP_DEP_ZSTD zstd::libzstd_static)
endif()
set(MEMSNAP_DEP_XXHASH PkgConfig::XXHASH)
set(MEMSNAP_DEP_TOMLPP PkgConfig::TOMLPP)
set(MEMSNAP_DEP_PUGIXML PkgConfig::PUGIXML)
if(MEMSNAP_STATIC_DEPS)
  include(${CMAKE_CURRENT_LIST_DIR}/memsnapStaticDependencies.cmake)
endif()
