build-dev/obj/tests/unit/test_handshake.o: tests/unit/test_handshake.cpp \
 common/handshake.hpp
common/handshake.hpp:
