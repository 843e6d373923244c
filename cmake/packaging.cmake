# What an install holds besides the targets, and the .deb (CPack).
#
# Components: `runtime` (bin/ccpool, ccpool-cli, ccpool-client, ccpool-client-fast, lib/libccpool-shim.so, lib/libccpool-trace.so,
# share/ccpool/python/ccpool; installed by the folders' own rules) is all the
# wheel takes (pyproject.toml). `systemd` (the user units) and `doc` complete
# `cmake --install`. `debian-python` is only in the .deb: a .pth that makes
# /usr/share/ccpool/python importable by Debian's python3.
install(CODE "set(CCPOOL_UNITS_SOURCE \"${PROJECT_SOURCE_DIR}/contrib/systemd\")
              set(CCPOOL_UNITS_STAGING \"${CMAKE_BINARY_DIR}/systemd-units\")" COMPONENT systemd)
install(SCRIPT ${CMAKE_CURRENT_LIST_DIR}/install_systemd_units.cmake COMPONENT systemd)

install(FILES README.md ARCHITECTURE.md BENCHMARKS.md DESTINATION share/doc/ccpool COMPONENT doc)
install(DIRECTORY docs/ DESTINATION share/doc/ccpool/docs COMPONENT doc FILES_MATCHING PATTERN "*.md")

# The private package directory, relative to dist-packages (a .pth line is
# relative to the directory that holds the .pth).
file(WRITE ${CMAKE_BINARY_DIR}/debian/ccpool.pth "../../../share/ccpool/python\n")
install(FILES ${CMAKE_BINARY_DIR}/debian/ccpool.pth DESTINATION lib/python3/dist-packages
        COMPONENT debian-python EXCLUDE_FROM_ALL)

# cpack -G DEB (in the build directory): build/ccpool_<version>_<arch>.deb,
# installable with `apt install ./ccpool_*.deb`. Depends come from
# dpkg-shlibdeps (Debian package dpkg-dev).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ccpool)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "ccpool developers <ccpool@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "One bounded, deduplicating compile pool per node, for ML training jobs")
set(CPACK_PACKAGE_DESCRIPTION
    "ccpool runs every compiler process of every rank of a training job in one bounded, memory-aware pool per node, \
caches the results in a content-addressed store and runs identical compiles once (gcc, clang, ptxas, nvcc, \
TorchInductor's compile workers). `ccpool run -- torchrun ...` wraps a launcher; `import ccpool; ccpool.enable()` \
does the same from inside a script.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
# Install with DESTDIR, so CMAKE_INSTALL_PREFIX is /usr while the units' ExecStart is written.
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL runtime systemd doc debian-python)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3")
include(CPack)
