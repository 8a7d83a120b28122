# compress-man.cmake -- CPack pre-build script: gzip -9n every manual page in
# the staging directories, as Debian ships them (lintian: an uncompressed
# page is an error). Runs after CPack installed the components and before it
# builds the packages (CPACK_PRE_BUILD_SCRIPTS).
file(GLOB_RECURSE files "${CPACK_TEMPORARY_DIRECTORY}/*")
foreach(f ${files})
	if(f MATCHES "/share/man/man[1-8]/[^/]+\\.[1-8]$")
		execute_process(COMMAND gzip -9n "${f}" COMMAND_ERROR_IS_FATAL ANY)
	endif()
endforeach()
