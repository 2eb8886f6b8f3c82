# Installation: header, libzarena.so (+ SONAME links), libzarena.a, the CMake package
# (zarena::zarena, zarena::zarena_static) and zarena.pc. Relocatable: the package files
# locate everything relative to themselves, so `cmake --install <build> --prefix <any>`
# yields a working prefix.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ZARENA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/zarena)

# Two export sets: the shared library's target needs nothing from the consumer; the static
# one needs Threads and (built with CUDA) CUDA::cudart_static, so zarenaConfig.cmake looks
# for those only to define zarena::zarena_static, and find_package(zarena) works without
# the CUDA Toolkit.
install(TARGETS zarena EXPORT zarenaTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS zarena_static EXPORT zarenaStaticTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The public headers. zarena_testing.h is not one (test hooks outside the contract, for the
# library's own suites and the bindings, which carry their copy): it is not installed.
install(FILES ${PROJECT_SOURCE_DIR}/capi/include/zarena/zarena.h
  ${PROJECT_SOURCE_DIR}/capi/include/zarena/zarena_plan.h
  ${PROJECT_SOURCE_DIR}/capi/include/zarena/zarena_graph.h
  ${PROJECT_SOURCE_DIR}/capi/include/zarena/zarena_kept.h
  ${PROJECT_SOURCE_DIR}/capi/include/zarena/zarena_lane.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zarena)
install(EXPORT zarenaTargets NAMESPACE zarena:: DESTINATION ${ZARENA_CMAKE_DIR})
install(EXPORT zarenaStaticTargets NAMESPACE zarena:: DESTINATION ${ZARENA_CMAKE_DIR})

# The C++ runtime libzarena.a needs: what the C++ compiler that built it links beyond what
# the C compiler does (libstdc++ and libm with GCC). A consumer that links it with the C
# compiler (a `project(mine C)`, a plain `cc`) must name them: zarenaConfig.cmake adds them
# to zarena::zarena_static, zarena-static.pc and zarena.pc's Libs.private list them.
set(ZARENA_CXX_RUNTIME_LIBS "")
foreach(lib ${CMAKE_CXX_IMPLICIT_LINK_LIBRARIES})
  if(NOT lib IN_LIST CMAKE_C_IMPLICIT_LINK_LIBRARIES AND NOT lib IN_LIST ZARENA_CXX_RUNTIME_LIBS)
    list(APPEND ZARENA_CXX_RUNTIME_LIBS ${lib})
  endif()
endforeach()
if(NOT ZARENA_CXX_RUNTIME_LIBS)
  message(FATAL_ERROR "zarena: cannot tell the C++ runtime libraries from the C ones "
    "(CMAKE_CXX_IMPLICIT_LINK_LIBRARIES: ${CMAKE_CXX_IMPLICIT_LINK_LIBRARIES})")
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/zarenaConfig.cmake.in
  ${PROJECT_BINARY_DIR}/zarenaConfig.cmake INSTALL_DESTINATION ${ZARENA_CMAKE_DIR})
# A program built against 1.x runs with any later 1.y (docs/ABI.md), never with 2.x.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zarenaConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zarenaConfig.cmake
  ${PROJECT_BINARY_DIR}/zarenaConfigVersion.cmake DESTINATION ${ZARENA_CMAKE_DIR})

# pkg-config. Libs.private is what linking libzarena.a needs on top of -lzarena: the C++
# runtime always, and the static CUDA runtime when built with CUDA.
if(IS_ABSOLUTE ${CMAKE_INSTALL_LIBDIR})
  set(ZARENA_PC_PREFIX ${CMAKE_INSTALL_PREFIX})
  set(ZARENA_PC_LIBDIR ${CMAKE_INSTALL_LIBDIR})
else()
  file(RELATIVE_PATH ZARENA_PC_UP /zarena_root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /zarena_root)
  string(REGEX REPLACE "/$" "" ZARENA_PC_UP "${ZARENA_PC_UP}")
  set(ZARENA_PC_PREFIX "\${pcfiledir}/${ZARENA_PC_UP}")
  set(ZARENA_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE ${CMAKE_INSTALL_INCLUDEDIR})
  set(ZARENA_PC_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
else()
  set(ZARENA_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(ZARENA_PC_LIBS_PRIVATE "")
if(ZARENA_HAVE_CUDA)
  string(APPEND ZARENA_PC_LIBS_PRIVATE "-L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt ")
endif()
string(APPEND ZARENA_PC_LIBS_PRIVATE "-lpthread")
foreach(lib ${ZARENA_CXX_RUNTIME_LIBS})
  string(APPEND ZARENA_PC_LIBS_PRIVATE " -l${lib}")
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/zarena.pc.in ${PROJECT_BINARY_DIR}/zarena.pc @ONLY)
# zarena-static.pc: libzarena.a with Libs.private on its one link line (the Go package's
# zarena_static tag: cgo cannot ask pkg-config for the archive instead of the .so).
configure_file(${PROJECT_SOURCE_DIR}/cmake/zarena-static.pc.in
  ${PROJECT_BINARY_DIR}/zarena-static.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/zarena.pc ${PROJECT_BINARY_DIR}/zarena-static.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Everything `cmake --install` copies, as one target: scripts/demo.sh builds it, so that an
# install right after the demo works. Every install(TARGETS) of the tree is listed here
# (tests/check_install_set.py checks that).
set(ZARENA_INSTALLED_TARGETS zarena zarena_static zarena_torch)
if(ZARENA_BUILD_TOOLS)
  list(APPEND ZARENA_INSTALLED_TARGETS zarena-replay)
endif()
add_custom_target(zarena_installable DEPENDS ${ZARENA_INSTALLED_TARGETS})
