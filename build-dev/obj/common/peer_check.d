build-dev/obj/common/peer_check.o: common/peer_check.cpp \
 common/peer_check.hpp
common/peer_check.hpp:
