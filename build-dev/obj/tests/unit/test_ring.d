build-dev/obj/tests/unit/test_ring.o: tests/unit/test_ring.cpp \
 tests/unit/local_ring.hpp common/ring_reader.hpp common/record_sink.hpp \
 common/ring_format.hpp common/ring_io.hpp common/ring_writer.hpp
tests/unit/local_ring.hpp:
common/ring_reader.hpp:
common/record_sink.hpp:
common/ring_format.hpp:
common/ring_io.hpp:
common/ring_writer.hpp:
