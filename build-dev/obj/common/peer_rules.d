build-dev/obj/common/peer_rules.o: common/peer_rules.cpp \
 common/peer_rules.hpp
common/peer_rules.hpp:
