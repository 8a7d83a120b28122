# bench_tcp: rdax over TCP loopback beside the TCP floor of the same run.
# Built, never run as a test. Included from tests/integration/CMakeLists.txt,
# which owns the harness (it starts and stops the daemon) and knows the
# librdax target (rdax_it_lib).
add_executable(bench_tcp ${CMAKE_CURRENT_LIST_DIR}/bench_tcp.c)
target_link_libraries(bench_tcp PRIVATE rdax_it_harness ${rdax_it_lib} Threads::Threads)
