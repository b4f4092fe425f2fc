build-dev/obj/tests/unit/test_shm_sweep.o: tests/unit/test_shm_sweep.cpp \
 common/shm_channel.hpp common/ring_reader.hpp common/record_sink.hpp \
 common/ring_format.hpp common/ring_io.hpp common/ring_writer.hpp \
 common/memfd_segment.hpp common/shm_segment.hpp common/shm_sweep.hpp
common/shm_channel.hpp:
common/ring_reader.hpp:
common/record_sink.hpp:
common/ring_format.hpp:
common/ring_io.hpp:
common/ring_writer.hpp:
common/memfd_segment.hpp:
common/shm_segment.hpp:
common/shm_sweep.hpp:
