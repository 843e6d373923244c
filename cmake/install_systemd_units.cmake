# Installs contrib/systemd's user units into <prefix>/lib/systemd/user with
# ExecStart naming the installed ccpool (<prefix>/bin/ccpool): the units in the
# tree say /usr/local/bin/ccpool, the default prefix. Runs at install time, so
# CMAKE_INSTALL_PREFIX is the prefix being installed to (cmake --install
# --prefix, or /usr for the .deb); CCPOOL_UNITS_SOURCE and CCPOOL_UNITS_STAGING
# are set by the install(CODE) before it (cmake/packaging.cmake).
foreach(unit ccpool.socket ccpool.service)
  file(READ "${CCPOOL_UNITS_SOURCE}/${unit}" text)
  string(REPLACE "ExecStart=/usr/local/bin/ccpool " "ExecStart=${CMAKE_INSTALL_PREFIX}/bin/ccpool " text "${text}")
  file(WRITE "${CCPOOL_UNITS_STAGING}/${unit}" "${text}")
endforeach()
file(INSTALL "${CCPOOL_UNITS_STAGING}/ccpool.socket" "${CCPOOL_UNITS_STAGING}/ccpool.service"
     DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/user" FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
