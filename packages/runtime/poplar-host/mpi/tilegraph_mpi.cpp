// The MPI shim (see tilegraph_mpi.h). Every exchange is non-blocking and
// polled, so that a process that stopped or fell far behind makes the others
// fail after the timeout instead of hanging forever.
#include "tilegraph_mpi.h"

// the C API is all we use: skip the C++ bindings
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <unistd.h>

namespace {

struct State {
  bool initialised = false;
  unsigned process = 0, processes = 1;
  double timeout = 300;
  pid_t parent = 0;
  MPI_Comm comm = MPI_COMM_NULL;
};
State state;

/// Largest piece of one MPI call: counts are ints. (Settable for testing the chunked path.)
#ifndef TILEGRAPH_MPI_CHUNK_BYTES
#define TILEGRAPH_MPI_CHUNK_BYTES (std::size_t(1) << 30)
#endif
constexpr std::size_t kChunk = TILEGRAPH_MPI_CHUNK_BYTES;

int fail(char *error, std::size_t errorBytes, const char *fmt, ...) {
  if (error && errorBytes > 0) {
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(error, errorBytes, fmt, args);
    va_end(args);
  }
  return 1;
}

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

int mpiFail(const char *what, int code, char *error, std::size_t errorBytes) {
  return fail(error, errorBytes, "%s failed in process %u of %u: %s", what, state.process, state.processes,
              mpiError(code).c_str());
}

/// Polls `request` until it completes, the deadline passes or the parent process ends.
int wait(MPI_Request &request, const char *what, char *error, std::size_t errorBytes) {
  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(state.timeout));
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    int done = 0;
    const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpiFail(what, rc, error, errorBytes);
    if (done) return 0;
    if (getppid() != state.parent)
      return fail(error, errorBytes, "the process that started this program (process %u) has ended", state.process);
    if (Clock::now() >= deadline)
      return fail(error, errorBytes,
                  "a collective across processes waited %g s for the other processes (process %u of %u): a process "
                  "has stopped or is far behind; TILEGRAPH_COLLECTIVE_TIMEOUT sets the limit",
                  state.timeout, state.process, state.processes);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

/// Allgather of `bytes` from each process on `comm`, in pieces of at most kChunk.
int allgather(MPI_Comm comm, const void *mine, std::size_t bytes, void *all, char *error, std::size_t errorBytes) {
  auto *out = static_cast<unsigned char *>(all);
  const auto *in = static_cast<const unsigned char *>(mine);
  if (bytes <= kChunk) {
    MPI_Request request;
    const int rc = MPI_Iallgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE, comm,
                                  &request);
    if (rc != MPI_SUCCESS) return mpiFail("MPI_Iallgather", rc, error, errorBytes);
    return wait(request, "MPI_Iallgather", error, errorBytes);
  }
  for (std::size_t at = 0; at < bytes; at += kChunk) {
    const std::size_t len = std::min(kChunk, bytes - at);
    // one piece per process, `bytes` apart: received in place, without a staging buffer
    MPI_Datatype piece, strided;
    MPI_Type_contiguous(static_cast<int>(len), MPI_BYTE, &piece);
    MPI_Type_create_resized(piece, 0, static_cast<MPI_Aint>(bytes), &strided);
    MPI_Type_commit(&strided);
    MPI_Request request;
    int rc = MPI_Iallgather(in + at, static_cast<int>(len), MPI_BYTE, out + at, 1, strided, comm, &request);
    if (rc != MPI_SUCCESS) rc = mpiFail("MPI_Iallgather", rc, error, errorBytes);
    else rc = wait(request, "MPI_Iallgather", error, errorBytes);
    MPI_Type_free(&strided);
    MPI_Type_free(&piece);
    if (rc) return rc;
  }
  return 0;
}

int notInitialised(char *error, std::size_t errorBytes) {
  return fail(error, errorBytes, "tilegraph_mpi: an exchange before tilegraph_mpi_init succeeded");
}

} // namespace

extern "C" {

int tilegraph_mpi_init(unsigned processId, unsigned processes, const char *fingerprint, double timeoutSeconds,
                       char *error, size_t errorBytes) {
  if (state.initialised) return fail(error, errorBytes, "tilegraph_mpi_init called twice");
  if (processes == 0 || processId >= processes)
    return fail(error, errorBytes, "process id %u is out of range for %u processes", processId, processes);
  std::string print = fingerprint ? fingerprint : "";
  if (print.size() > 128)
    return fail(error, errorBytes,
                "the fingerprint (TILEGRAPH_DISTRIBUTED_FINGERPRINT) has %zu characters, more than 128", print.size());
  state.process = processId;
  state.processes = processes;
  state.timeout = timeoutSeconds > 0 ? timeoutSeconds : 300;
  state.parent = getppid();

  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    // several threads may call MPI, one at a time (the caller serialises them)
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return mpiFail("MPI_Init_thread", rc, error, errorBytes);
    if (provided < MPI_THREAD_SERIALIZED)
      return fail(error, errorBytes, "this MPI library does not support MPI_THREAD_SERIALIZED (process %u)", processId);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (static_cast<unsigned>(size) != processes)
    return fail(error, errorBytes, "Options.Distributed says %u processes but mpirun started %d", processes, size);
  // ranks in `comm` are process ids
  int rc = MPI_Comm_split(MPI_COMM_WORLD, 0, static_cast<int>(processId), &state.comm);
  if (rc != MPI_SUCCESS) return mpiFail("MPI_Comm_split", rc, error, errorBytes);
  MPI_Comm_set_errhandler(state.comm, MPI_ERRORS_RETURN);
  state.initialised = true;

  // Exchanged on MPI_COMM_WORLD, whose rank order does not depend on the ids.
  std::vector<unsigned> ids(processes);
  if (allgather(MPI_COMM_WORLD, &processId, sizeof processId, ids.data(), error, errorBytes)) return 1;
  std::vector<unsigned> seen(processes, 0);
  for (unsigned id : ids) {
    if (id >= processes)
      return fail(error, errorBytes, "a process has id %u, out of range for %u processes", id, processes);
    if (seen[id]++)
      return fail(error, errorBytes,
                  "two processes have process id %u: start each process with its own TILEGRAPH_PROCESS_ID "
                  "(0 to %u)", id, processes - 1);
  }
  char mine[129] = {0};
  std::memcpy(mine, print.data(), print.size());
  std::vector<char> all(129 * std::size_t(processes));
  if (allgather(state.comm, mine, sizeof mine, all.data(), error, errorBytes)) return 1;
  std::string differ;
  unsigned first = 0;
  for (unsigned p = 1; p < processes; ++p)
    if (std::strcmp(all.data(), all.data() + 129 * p) != 0) {
      if (differ.empty()) first = p;
      differ += (differ.empty() ? "" : ", ") + std::to_string(p);
    }
  if (!differ.empty())
    return fail(error, errorBytes,
                "process%s %s run%s a different model or different options than process 0 (fingerprint %s vs %s): "
                "start every process with the same model and options",
                differ.find(',') != std::string::npos ? "es" : "", differ.c_str(),
                differ.find(',') != std::string::npos ? "" : "s", all.data() + 129 * first, all.data());
  return 0;
}

int tilegraph_mpi_allgather(const void *mine, size_t bytes, void *all, char *error, size_t errorBytes) {
  if (!state.initialised) return notInitialised(error, errorBytes);
  return allgather(state.comm, mine, bytes, all, error, errorBytes);
}

int tilegraph_mpi_broadcast(void *data, size_t bytes, unsigned root, char *error, size_t errorBytes) {
  if (!state.initialised) return notInitialised(error, errorBytes);
  if (root >= state.processes)
    return fail(error, errorBytes, "broadcast from process %u, but there are %u processes", root, state.processes);
  auto *p = static_cast<unsigned char *>(data);
  std::size_t at = 0;
  do { // at least one call, so that zero-byte broadcasts still meet
    const std::size_t len = std::min(kChunk, bytes - at);
    MPI_Request request;
    const int rc = MPI_Ibcast(p + at, static_cast<int>(len), MPI_BYTE, static_cast<int>(root), state.comm, &request);
    if (rc != MPI_SUCCESS) return mpiFail("MPI_Ibcast", rc, error, errorBytes);
    if (wait(request, "MPI_Ibcast", error, errorBytes)) return 1;
    at += len;
  } while (at < bytes);
  return 0;
}

void tilegraph_mpi_abort(int code) {
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (up && !down) MPI_Abort(MPI_COMM_WORLD, code);
  _exit(code);
}

void tilegraph_mpi_finalize(void) {
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (!up || down) return;
  if (state.comm != MPI_COMM_NULL) MPI_Comm_free(&state.comm);
  MPI_Finalize();
}

} // extern "C"
