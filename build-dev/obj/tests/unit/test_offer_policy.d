build-dev/obj/tests/unit/test_offer_policy.o: \
 tests/unit/test_offer_policy.cpp common/offer_policy.hpp \
 common/config.hpp common/log.hpp common/peer_rules.hpp \
 common/handshake.hpp
common/offer_policy.hpp:
common/config.hpp:
common/log.hpp:
common/peer_rules.hpp:
common/handshake.hpp:
