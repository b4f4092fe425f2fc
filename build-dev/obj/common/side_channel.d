build-dev/obj/common/side_channel.o: common/side_channel.cpp \
 common/side_channel.hpp
common/side_channel.hpp:
