build-dev/obj/common/log.o: common/log.cpp common/log.hpp
common/log.hpp:
