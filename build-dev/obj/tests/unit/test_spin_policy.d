build-dev/obj/tests/unit/test_spin_policy.o: \
 tests/unit/test_spin_policy.cpp common/spin_policy.hpp
common/spin_policy.hpp:
