build-dev/obj/common/ring_reader.o: common/ring_reader.cpp \
 common/ring_reader.hpp common/record_sink.hpp common/ring_format.hpp \
 common/ring_io.hpp
common/ring_reader.hpp:
common/record_sink.hpp:
common/ring_format.hpp:
common/ring_io.hpp:
