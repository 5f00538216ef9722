// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_exceptions_hpp
#define poplar_exceptions_hpp

#include <stdexcept>
#include <string>

namespace poplar {

/// Base of every error the library raises.
struct poplar_error : std::runtime_error {
  explicit poplar_error(const std::string &s) : std::runtime_error(s) {}
  explicit poplar_error(const char *s) : std::runtime_error(s) {}
};

#define POPLAR_HOST_ERROR(name, base)                                          \
  struct name : base {                                                         \
    explicit name(const std::string &s) : base(s) {}                           \
    explicit name(const char *s) : base(s) {}                                  \
  };

POPLAR_HOST_ERROR(graph_program_compilation_error, poplar_error)
POPLAR_HOST_ERROR(graph_object_creation_error, poplar_error)
POPLAR_HOST_ERROR(no_environment, poplar_error)
POPLAR_HOST_ERROR(unknown_vertex_type, poplar_error)
POPLAR_HOST_ERROR(unknown_field, poplar_error)
POPLAR_HOST_ERROR(control_program_error, poplar_error)
POPLAR_HOST_ERROR(type_error, poplar_error)
POPLAR_HOST_ERROR(index_error, poplar_error)
POPLAR_HOST_ERROR(no_size_specified, poplar_error)
POPLAR_HOST_ERROR(graph_connection_error, poplar_error)
POPLAR_HOST_ERROR(graph_cycle_error, poplar_error)
POPLAR_HOST_ERROR(graph_replication_error, poplar_error)
POPLAR_HOST_ERROR(missing_perf_estimate, poplar_error)
POPLAR_HOST_ERROR(invalid_tile_mapping, poplar_error)
POPLAR_HOST_ERROR(tensor_creation_error, poplar_error)
POPLAR_HOST_ERROR(tensor_io_state_error, poplar_error)
POPLAR_HOST_ERROR(stream_connection_error, poplar_error)
POPLAR_HOST_ERROR(overflow_error, poplar_error)
POPLAR_HOST_ERROR(graph_memory_allocation_error, poplar_error)
POPLAR_HOST_ERROR(stream_memory_allocation_error, poplar_error)
POPLAR_HOST_ERROR(invalid_machine_model, poplar_error)
POPLAR_HOST_ERROR(invalid_option, poplar_error)
POPLAR_HOST_ERROR(parse_error, poplar_error)
POPLAR_HOST_ERROR(file_load_error, poplar_error)
POPLAR_HOST_ERROR(runtime_error, poplar_error)
POPLAR_HOST_ERROR(application_runtime_error, runtime_error)
POPLAR_HOST_ERROR(system_runtime_error, runtime_error)

/// Emulation-only: raised for a tensor without a complete tile mapping when an
/// Engine is built. It derives from the real invalid_tile_mapping, which is
/// what portable code should catch.
POPLAR_HOST_ERROR(invalid_graph, invalid_tile_mapping)

#undef POPLAR_HOST_ERROR

struct graph_object_load_error : poplar_error {
  graph_object_load_error(const std::string &path, const std::string &error)
      : poplar_error("Error loading graph object '" + path + "': " + error) {}
};

struct link_error : poplar_error {
  explicit link_error(const std::string &error, const std::string &output = "")
      : poplar_error(output.empty() ? error : error + "\n" + output) {}
};

} // namespace poplar

#endif
