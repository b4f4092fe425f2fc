build-dev/obj/benchmarks/pingpong.o: benchmarks/pingpong.cpp \
 benchmarks/pingpong_harness.hpp benchmarks/pingpong_stats.hpp \
 common/shm_channel.hpp common/ring_reader.hpp common/record_sink.hpp \
 common/ring_format.hpp common/ring_io.hpp common/ring_writer.hpp \
 common/memfd_segment.hpp common/shm_segment.hpp
benchmarks/pingpong_harness.hpp:
benchmarks/pingpong_stats.hpp:
common/shm_channel.hpp:
common/ring_reader.hpp:
common/record_sink.hpp:
common/ring_format.hpp:
common/ring_io.hpp:
common/ring_writer.hpp:
common/memfd_segment.hpp:
common/shm_segment.hpp:
