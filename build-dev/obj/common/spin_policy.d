build-dev/obj/common/spin_policy.o: common/spin_policy.cpp \
 common/spin_policy.hpp
common/spin_policy.hpp:
