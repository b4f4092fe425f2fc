build-dev/obj/common/handshake.o: common/handshake.cpp \
 common/handshake.hpp
common/handshake.hpp:
