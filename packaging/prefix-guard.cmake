# prefix-guard.cmake -- the install prefix is the configured one.
#
# The systemd unit and librdax.pc carry paths of CMAKE_INSTALL_PREFIX, filled
# in at configure time. `cmake --install --prefix OTHER` would put them under
# OTHER still pointing at the configured prefix, so it is refused with a
# message, for every component. Stage with DESTDIR=DIR instead (the packages
# do), or configure with -DCMAKE_INSTALL_PREFIX=OTHER.
#
# Included by the top-level CMakeLists.txt before any install rule, so it runs
# first. RDAX_INSTALL_COMPONENTS is the list of install components (one per
# Debian package, packaging/CMakeLists.txt).
set(RDAX_INSTALL_COMPONENTS daemon cli lib dev)
foreach(component ${RDAX_INSTALL_COMPONENTS} Unspecified)
	install(CODE "
		if(NOT CMAKE_INSTALL_PREFIX STREQUAL \"${CMAKE_INSTALL_PREFIX}\")
			message(FATAL_ERROR \"rdax was configured for the prefix ${CMAKE_INSTALL_PREFIX}, \"
				\"whose paths are in the unit and librdax.pc: to install under \"
				\"\${CMAKE_INSTALL_PREFIX}, configure with -DCMAKE_INSTALL_PREFIX=\"
				\"\${CMAKE_INSTALL_PREFIX}; to stage, use DESTDIR=DIR\")
		endif()" COMPONENT ${component})
endforeach()
