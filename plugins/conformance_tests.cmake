# Conformance of every shipped attention variant and option set:
# scripts/check_plugin.lua, one ctest each (label "conformance").
# Included from tests/ (needs EMBER_BIN and TEST_ENV from tests/CMakeLists.txt).
set(EMBER_CONFORMANCE_RUNS
  "standard"
  "standard|kernel=fused"
  "standard|kernel=dense"
  "local|window_left=2|window_right=1"
  "local|window_left=1|window_right=0"
  "local|mode=block|block_size=2|local_blocks=1|global_tokens=1"
  "local|mode=block|block_size=2|local_blocks=0|global_blocks=1"
  "relpos|max_relative_position=2"
  "relpos|mode=t5|num_buckets=8|max_distance=6"
  "relpos|mode=t5|num_buckets=6|bidirectional=false"
  "relpos|mode=alibi"
  "relpos|kernel=dense|max_relative_position=2"
  "relpos|kernel=dense|mode=t5|num_buckets=8|max_distance=6"
  "linear"
  "linear|feature_map=favor|num_features=16"
  "linear|feature_map=favor|num_features=8|redraw=true"
  # the core-op path other backends take, forced on the CPU; chunk=2 and 3
  # cut the checker's short sequences into several prefix-sum blocks
  "linear|kernel=composed|chunk=2"
  "linear|kernel=composed|feature_map=favor|num_features=16|chunk=3"
  # variants written in Lua (plugins/flex), held to their own composition
  "softcap|cap=1.5"
  "document"
  "sliding_sinks|window_left=2|window_right=1|sinks=1"
  "prefix_lm"
  "sinks"
  "example_lua|max_distance=3"
  "alibi_lua"
  "window_lua|window_left=2|window_right=1"
  "t5_lua|num_buckets=8|max_distance=6")
foreach(run ${EMBER_CONFORMANCE_RUNS})
  string(REPLACE "|" ";" args "${run}")
  string(REPLACE "|" "." tname "${run}")
  string(REPLACE "=" "_" tname "${tname}")
  add_test(NAME conformance.${tname}
    COMMAND ${EMBER_BIN} ${PROJECT_SOURCE_DIR}/scripts/check_plugin.lua ${args}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(conformance.${tname} PROPERTIES LABELS "conformance" ENVIRONMENT "${TEST_ENV}")
endforeach()
