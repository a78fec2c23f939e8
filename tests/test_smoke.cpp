#include <catch2/catch.hpp>
#include "encodings/registry.hpp"
TEST_CASE("registry knows none", "[registry]") { REQUIRE(poslab::find_encoding("none") != nullptr); }
