// The MPI shim of poplar-host: the few cross-process exchanges a distributed
// run needs, behind a C ABI so that poplar-host can dlopen it and never links
// libmpi itself. Built by the tilegraph runtime with
//   mpicxx -O2 -std=c++17 -shared -fPIC -I<this folder> tilegraph_mpi.cpp -o libtilegraph_mpi.so
// Calls must not overlap (one thread at a time); the caller serialises them.
#ifndef TILEGRAPH_MPI_H
#define TILEGRAPH_MPI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Each returns 0 on success; otherwise non-zero and a NUL-terminated message in error[errorBytes].

/// Starts MPI and checks that the `processes` processes have distinct ids and the same fingerprint.
/// Every later exchange fails after waiting timeoutSeconds for the others.
int tilegraph_mpi_init(unsigned processId, unsigned processes, const char *fingerprint, double timeoutSeconds,
                       char *error, size_t errorBytes);
/// all: processes x bytes, in process-id order.
int tilegraph_mpi_allgather(const void *mine, size_t bytes, void *all, char *error, size_t errorBytes);
/// root is a process id.
int tilegraph_mpi_broadcast(void *data, size_t bytes, unsigned root, char *error, size_t errorBytes);
/// Ends every process of the run (after an unrecoverable error).
void tilegraph_mpi_abort(int code);
/// At normal exit.
void tilegraph_mpi_finalize(void);

#ifdef __cplusplus
}
#endif

#endif
