build-dev/obj/common/memfd_segment.o: common/memfd_segment.cpp \
 common/memfd_segment.hpp
common/memfd_segment.hpp:
