// Catch2 v2 entry point for core_tests (no Python: core/ has no Python dependency).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
