# CMake package of the halojit embedding library, installed inside the
# Python package. Use it with
#
#   cmake -Dhalojit_DIR="$(halojit --cmake-dir)" ...
#   find_package(halojit REQUIRED)
#   target_link_libraries(app PRIVATE halojit::halojit)
#
# halojit::halojit brings the C ABI (halojit/halojit.h), the C++ wrapper
# (halojit/halojit.hpp) and libhalojit.so; it needs neither Python nor
# libHalide at build or run time.
get_filename_component(_halojit_root "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(_halojit_lib "${_halojit_root}/lib/libhalojit.so")
if(NOT EXISTS "${_halojit_lib}")
  set(halojit_FOUND FALSE)
  set(halojit_NOT_FOUND_MESSAGE "${_halojit_lib} is missing; reinstall halojit (pip install halojit)")
  return()
endif()
if(NOT TARGET halojit::halojit)
  add_library(halojit::halojit SHARED IMPORTED)
  set_target_properties(halojit::halojit PROPERTIES
    IMPORTED_LOCATION "${_halojit_lib}"
    INTERFACE_INCLUDE_DIRECTORIES "${_halojit_root}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()
set(halojit_INCLUDE_DIRS "${_halojit_root}/include")
set(halojit_LIBRARIES halojit::halojit)
unset(_halojit_lib)
unset(_halojit_root)
