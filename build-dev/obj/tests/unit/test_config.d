build-dev/obj/tests/unit/test_config.o: tests/unit/test_config.cpp \
 common/config.hpp common/log.hpp common/peer_rules.hpp
common/config.hpp:
common/log.hpp:
common/peer_rules.hpp:
