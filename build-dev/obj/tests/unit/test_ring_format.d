build-dev/obj/tests/unit/test_ring_format.o: \
 tests/unit/test_ring_format.cpp common/ring_format.hpp
common/ring_format.hpp:
