build-dev/obj/common/config.o: common/config.cpp common/config.hpp \
 common/log.hpp common/peer_rules.hpp common/ring_format.hpp
common/config.hpp:
common/log.hpp:
common/peer_rules.hpp:
common/ring_format.hpp:
