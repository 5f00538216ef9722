// The processes of a distributed run (see world.hpp).
#include "world.hpp"

#include "internal.hpp"

#include <poplar/exceptions.hpp>

#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace poplar_host {

namespace {

// the shim's C ABI (mpi/tilegraph_mpi.h)
using InitFn = int (*)(unsigned, unsigned, const char *, double, char *, std::size_t);
using AllgatherFn = int (*)(const void *, std::size_t, void *, char *, std::size_t);
using BroadcastFn = int (*)(void *, std::size_t, unsigned, char *, std::size_t);
using AbortFn = void (*)(int);
using FinalizeFn = void (*)();

struct Shim {
  AllgatherFn allgather = nullptr;
  BroadcastFn broadcast = nullptr;
  AbortFn abort = nullptr;
  FinalizeFn finalize = nullptr;
};
Shim shim;
std::mutex callMutex;              ///< MPI is initialised for one thread at a time
std::atomic<bool> outOfStep{false}; ///< see World::broken

void atExit() {
  if (outOfStep.load()) {
    std::fflush(nullptr); // abort never returns to the exit handlers that would flush
    shim.abort(1);
  }
  else shim.finalize();
}

unsigned readCount(const char *name, const char *text, unsigned min) {
  char *end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (errno || end == text || *end != '\0' || v < min || v > 1u << 20)
    throw poplar::runtime_error(message(name, "='", text, "' is not a valid number (distributed run)"));
  return static_cast<unsigned>(v);
}

template <class F> F symbol(void *lib, const char *path, const char *name) {
  void *p = dlsym(lib, name);
  if (!p)
    throw poplar::runtime_error(message("the MPI shim ", path, " has no symbol ", name,
                                        ": rebuild it from packages/runtime/poplar-host/mpi/tilegraph_mpi.cpp"));
  return reinterpret_cast<F>(p);
}

World start() {
  World w;
  const char *count = std::getenv("TILEGRAPH_NUM_PROCESSES");
  if (!count || !*count) return w;
  w.processes = readCount("TILEGRAPH_NUM_PROCESSES", count, 1);
  if (w.processes == 1) return w;
  const char *id = std::getenv("TILEGRAPH_PROCESS_ID");
  if (!id || !*id)
    throw poplar::runtime_error(message("TILEGRAPH_NUM_PROCESSES is ", w.processes,
                                        " but TILEGRAPH_PROCESS_ID is not set: each process of a distributed run "
                                        "needs its id (0 to ", w.processes - 1, ")"));
  w.process = readCount("TILEGRAPH_PROCESS_ID", id, 0);
  if (w.process >= w.processes)
    throw poplar::runtime_error(message("TILEGRAPH_PROCESS_ID is ", w.process, " but there are only ", w.processes,
                                        " processes (TILEGRAPH_NUM_PROCESSES)"));
  double timeout = 300;
  if (const char *t = std::getenv("TILEGRAPH_COLLECTIVE_TIMEOUT"); t && *t) {
    char *end = nullptr;
    timeout = std::strtod(t, &end);
    if (end == t || *end != '\0' || !(timeout > 0))
      throw poplar::runtime_error(
          message("TILEGRAPH_COLLECTIVE_TIMEOUT='", t, "' is not a positive number of seconds"));
  }
  const char *fingerprint = std::getenv("TILEGRAPH_DISTRIBUTED_FINGERPRINT");
  const char *path = std::getenv("TILEGRAPH_MPI_LIBRARY");
  const std::string needs = "a distributed run needs OpenMPI (Debian: openmpi-bin, libopenmpi-dev)";
  if (!path || !*path)
    throw poplar::runtime_error(needs + ", and TILEGRAPH_MPI_LIBRARY (the MPI shim built from "
                                       "packages/runtime/poplar-host/mpi/tilegraph_mpi.cpp) is not set");
  // RTLD_GLOBAL: OpenMPI's plugins look up libmpi's symbols globally
  void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    const char *why = dlerror();
    throw poplar::runtime_error(message(needs, "; loading the MPI shim failed: ", why ? why : path));
  }
  auto init = symbol<InitFn>(lib, path, "tilegraph_mpi_init");
  shim.allgather = symbol<AllgatherFn>(lib, path, "tilegraph_mpi_allgather");
  shim.broadcast = symbol<BroadcastFn>(lib, path, "tilegraph_mpi_broadcast");
  shim.abort = symbol<AbortFn>(lib, path, "tilegraph_mpi_abort");
  shim.finalize = symbol<FinalizeFn>(lib, path, "tilegraph_mpi_finalize");
  char error[1024] = {0};
  // MPI may have started even when init fails: end every process at exit then
  std::atexit(atExit);
  if (init(w.process, w.processes, fingerprint ? fingerprint : "", timeout, error, sizeof error) != 0) {
    outOfStep = true;
    throw poplar::runtime_error(message("distributed run, process ", w.process, " of ", w.processes, ": ", error));
  }
  return w;
}

void check(int rc, const char *error) {
  if (rc == 0) return;
  outOfStep = true;
  throw poplar::runtime_error(error);
}

} // namespace

World &world() {
  // made once and never destroyed: the exit handler may still need it
  static std::mutex m;
  static World *w = nullptr;
  static std::string failure;
  std::lock_guard<std::mutex> lock(m);
  if (w) return *w;
  if (!failure.empty()) throw poplar::runtime_error(failure);
  try {
    w = new World(start());
  } catch (const poplar::runtime_error &e) {
    failure = e.what();
    throw;
  }
  return *w;
}

void World::allgather(const void *mine, std::size_t bytes, void *all) {
  std::lock_guard<std::mutex> lock(callMutex);
  char error[1024] = {0};
  check(shim.allgather(mine, bytes, all, error, sizeof error), error);
}

void World::broadcast(void *data, std::size_t bytes, unsigned root) {
  std::lock_guard<std::mutex> lock(callMutex);
  char error[1024] = {0};
  check(shim.broadcast(data, bytes, root, error, sizeof error), error);
}

void World::broken() { outOfStep = true; }

} // namespace poplar_host
