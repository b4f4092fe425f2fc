build-dev/obj/tests/unit/test_peer_rules.o: \
 tests/unit/test_peer_rules.cpp common/peer_rules.hpp
common/peer_rules.hpp:
