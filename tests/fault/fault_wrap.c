/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_wrap.c -- every fallible call of rdaxd, through a counted fault point
 *
 * rdaxd-fault is rdaxd linked with -Wl,--wrap=NAME for each call below
 * (CMakeLists.txt): the daemon's own references to NAME reach __wrap_NAME
 * here, which asks faults_point() (common/faults.h) and either fails the
 * way the real call fails (its error value, errno set) or calls
 * __real_NAME. Calls made inside libraries (libc's own allocations,
 * libev's, libpmem's) are not counted: what is tested is what the daemon
 * does with a failure it is told about.
 *
 * Not wrapped, on purpose: the write-back path (pwrite of the simulator,
 * msync, fdatasync), whose failure after an acknowledged write makes the
 * daemon abort rather than lie (style.md, "Errors"), and best-effort calls
 * whose result is ignored (setsockopt of TCP_NODELAY and the like). Verbs
 * and rdma_cm calls are not wrapped yet: they run only in the RDMA VM.
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <fcntl.h>
#include <unistd.h>

#include <ev.h>
#include <libpmem.h>
#include <protobuf-c/protobuf-c.h>

#include "faults.h"

/* Each wrapper's real call (the linker's __real_ alias) and the wrapper itself. */
#define WRAP_DECL(ret, name, ...)                                                                  \
	ret __real_##name(__VA_ARGS__);                                                            \
	ret __wrap_##name(__VA_ARGS__)

WRAP_DECL(void *, malloc, size_t n);
void *__wrap_malloc(size_t n)
{
	if (faults_point("malloc")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_malloc(n);
}

WRAP_DECL(void *, calloc, size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size)
{
	if (faults_point("calloc")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, size);
}

WRAP_DECL(void *, realloc, void *p, size_t n);
void *__wrap_realloc(void *p, size_t n)
{
	if (faults_point("realloc")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_realloc(p, n);
}

WRAP_DECL(char *, strdup, const char *s);
char *__wrap_strdup(const char *s)
{
	if (faults_point("strdup")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_strdup(s);
}

WRAP_DECL(char *, strndup, const char *s, size_t n);
char *__wrap_strndup(const char *s, size_t n)
{
	if (faults_point("strndup")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_strndup(s, n);
}

/* asprintf is variadic: the wrapper formats with vasprintf (not wrapped itself) */
int __wrap_asprintf(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int __wrap_asprintf(char **out, const char *fmt, ...)
{
	if (faults_point("asprintf")) {
		errno = ENOMEM;
		return -1;
	}
	va_list ap;
	va_start(ap, fmt);
	int ret = vasprintf(out, fmt, ap);
	va_end(ap);
	return ret;
}

WRAP_DECL(int, posix_memalign, void **p, size_t align, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
	if (faults_point("posix_memalign"))
		return ENOMEM;
	return __real_posix_memalign(p, align, n);
}

WRAP_DECL(int, socket, int domain, int type, int protocol);
int __wrap_socket(int domain, int type, int protocol)
{
	if (faults_point("socket")) {
		errno = EMFILE;
		return -1;
	}
	return __real_socket(domain, type, protocol);
}

WRAP_DECL(int, bind, int fd, const struct sockaddr *sa, socklen_t len);
int __wrap_bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (faults_point("bind")) {
		errno = EADDRINUSE;
		return -1;
	}
	return __real_bind(fd, sa, len);
}

WRAP_DECL(int, listen, int fd, int backlog);
int __wrap_listen(int fd, int backlog)
{
	if (faults_point("listen")) {
		errno = EADDRINUSE;
		return -1;
	}
	return __real_listen(fd, backlog);
}

WRAP_DECL(int, accept4, int fd, struct sockaddr *sa, socklen_t *len, int flags);
int __wrap_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	if (faults_point("accept4")) {
		errno = EMFILE;
		return -1;
	}
	return __real_accept4(fd, sa, len, flags);
}

WRAP_DECL(int, getaddrinfo, const char *node, const char *service, const struct addrinfo *hints,
	  struct addrinfo **res);
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	if (faults_point("getaddrinfo"))
		return EAI_MEMORY;
	return __real_getaddrinfo(node, service, hints, res);
}

WRAP_DECL(int, eventfd, unsigned int initval, int flags);
int __wrap_eventfd(unsigned int initval, int flags)
{
	if (faults_point("eventfd")) {
		errno = EMFILE;
		return -1;
	}
	return __real_eventfd(initval, flags);
}

WRAP_DECL(int, pipe2, int fds[2], int flags);
int __wrap_pipe2(int fds[2], int flags)
{
	if (faults_point("pipe2")) {
		errno = EMFILE;
		return -1;
	}
	return __real_pipe2(fds, flags);
}

/* open is variadic: the mode is there only with O_CREAT or O_TMPFILE */
int __real_open(const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) { /* glibc's __OPEN_NEEDS_MODE */
		va_list ap;
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, unsigned int);
		va_end(ap);
	}
	if (faults_point("open")) {
		errno = EMFILE;
		return -1;
	}
	return __real_open(path, flags, mode);
}

WRAP_DECL(void *, mmap, void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (faults_point("mmap")) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return __real_mmap(addr, len, prot, flags, fd, off);
}

WRAP_DECL(int, ftruncate, int fd, off_t len);
int __wrap_ftruncate(int fd, off_t len)
{
	if (faults_point("ftruncate")) {
		errno = ENOSPC;
		return -1;
	}
	return __real_ftruncate(fd, len);
}

WRAP_DECL(int, posix_fallocate, int fd, off_t off, off_t len);
int __wrap_posix_fallocate(int fd, off_t off, off_t len)
{
	if (faults_point("posix_fallocate"))
		return ENOSPC;
	return __real_posix_fallocate(fd, off, len);
}

WRAP_DECL(int, fallocate, int fd, int mode, off_t off, off_t len);
int __wrap_fallocate(int fd, int mode, off_t off, off_t len)
{
	if (faults_point("fallocate")) {
		errno = ENOSPC;
		return -1;
	}
	return __real_fallocate(fd, mode, off, len);
}

WRAP_DECL(int, flock, int fd, int op);
int __wrap_flock(int fd, int op)
{
	if (faults_point("flock")) {
		errno = ENOLCK;
		return -1;
	}
	return __real_flock(fd, op);
}

WRAP_DECL(void *, pmem_map_file, const char *path, size_t len, int flags, mode_t mode,
	  size_t *mapped, int *is_pmem);
void *__wrap_pmem_map_file(const char *path, size_t len, int flags, mode_t mode, size_t *mapped,
			   int *is_pmem)
{
	if (faults_point("pmem_map_file")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_pmem_map_file(path, len, flags, mode, mapped, is_pmem);
}

WRAP_DECL(int, pthread_create, pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
	  void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	if (faults_point("pthread_create"))
		return EAGAIN;
	return __real_pthread_create(t, attr, fn, arg);
}

WRAP_DECL(struct ev_loop *, ev_loop_new, unsigned int flags);
struct ev_loop *__wrap_ev_loop_new(unsigned int flags)
{
	if (faults_point("ev_loop_new"))
		return NULL;
	return __real_ev_loop_new(flags);
}

WRAP_DECL(ProtobufCMessage *, protobuf_c_message_unpack, const ProtobufCMessageDescriptor *desc,
	  ProtobufCAllocator *alloc, size_t len, const uint8_t *data);
ProtobufCMessage *__wrap_protobuf_c_message_unpack(const ProtobufCMessageDescriptor *desc,
						   ProtobufCAllocator *alloc, size_t len,
						   const uint8_t *data)
{
	if (faults_point("protobuf_c_message_unpack"))
		return NULL;
	return __real_protobuf_c_message_unpack(desc, alloc, len, data);
}
