build-dev/obj/common/registry.o: common/registry.cpp common/registry.hpp
common/registry.hpp:
