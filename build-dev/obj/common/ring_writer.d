build-dev/obj/common/ring_writer.o: common/ring_writer.cpp \
 common/ring_writer.hpp common/record_sink.hpp common/ring_format.hpp \
 common/ring_io.hpp
common/ring_writer.hpp:
common/record_sink.hpp:
common/ring_format.hpp:
common/ring_io.hpp:
