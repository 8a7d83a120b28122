# rdaxd, the daemon: included by daemon/CMakeLists.txt when rdaxd.c exists.
#
# rdaxd_core: everything of the daemon but main(), so the unit tests can link it.
pkg_check_modules(RDMACM REQUIRED IMPORTED_TARGET librdmacm)
pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)
add_library(rdaxd_core STATIC
	${CMAKE_CURRENT_LIST_DIR}/config.c
	${CMAKE_CURRENT_LIST_DIR}/store.c
	${CMAKE_CURRENT_LIST_DIR}/session.c
	${CMAKE_CURRENT_LIST_DIR}/dispatch.c
	${CMAKE_CURRENT_LIST_DIR}/worker.c
	${CMAKE_CURRENT_LIST_DIR}/fsync_pool.c
	${CMAKE_CURRENT_LIST_DIR}/conn_tcp.c
	${CMAKE_CURRENT_LIST_DIR}/sock.c
	${CMAKE_CURRENT_LIST_DIR}/server_tcp.c
	${CMAKE_CURRENT_LIST_DIR}/nbd_proto.c
	${CMAKE_CURRENT_LIST_DIR}/conn_nbd.c
	${CMAKE_CURRENT_LIST_DIR}/server_nbd.c
	${CMAKE_CURRENT_LIST_DIR}/rdma_dev.c
	${CMAKE_CURRENT_LIST_DIR}/conn_rdma.c
	${CMAKE_CURRENT_LIST_DIR}/server_rdma.c)
target_include_directories(rdaxd_core PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_compile_definitions(rdaxd_core PUBLIC RDAX_VERSION="${PROJECT_VERSION}")
target_link_libraries(rdaxd_core PUBLIC rdax_engine rdax_proto rdax_pb libev::libev Threads::Threads
	PkgConfig::RDMACM PkgConfig::IBVERBS)

add_executable(rdaxd ${CMAKE_CURRENT_LIST_DIR}/rdaxd.c)
target_link_libraries(rdaxd PRIVATE rdaxd_core)

# Install: the binary, the systemd unit (paths filled in for this prefix) and the
# example configuration, installed as the configuration the unit reads (every
# setting in it is commented out: a bare rdaxd's defaults apply until edited).
set(RDAX_SYSTEMD_UNITDIR "lib/systemd/system" CACHE PATH
	"Where to install rdaxd.service (relative to the prefix, or absolute)")
install(TARGETS rdaxd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
configure_file(${PROJECT_SOURCE_DIR}/deploy/rdaxd.service
	${CMAKE_CURRENT_BINARY_DIR}/rdaxd.service @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/rdaxd.service DESTINATION ${RDAX_SYSTEMD_UNITDIR})
install(FILES ${PROJECT_SOURCE_DIR}/deploy/rdaxd.conf.example
	DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/rdax RENAME rdaxd.conf)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/rdaxd.conf.example DESTINATION ${CMAKE_INSTALL_DOCDIR})

# tests/unit/test_config.c, test_dispatch*.c and test_fsync_inline.c are globbed by tests/unit like every
# unit test (one cmocka binary each, linked with rdax_engine); they also need
# rdaxd_core. tests/ is added after daemon/, so link them once the top-level
# directory is done, when the targets exist.
if(BUILD_TESTS)
	function(rdaxd_link_unit_tests)
		foreach(t test_config test_dispatch test_dispatch_plain test_fsync_inline)
			if(TARGET ${t})
				target_link_libraries(${t} PRIVATE rdaxd_core)
			endif()
		endforeach()
	endfunction()
	if(CMAKE_VERSION VERSION_LESS 3.19)
		message(WARNING "CMake < 3.19: test_config and test_dispatch cannot be linked "
			"with rdaxd_core; build with a newer CMake or -DBUILD_TESTS=OFF")
	else()
		cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL rdaxd_link_unit_tests)
	endif()
endif()
