build-dev/obj/tools/rdmasock/doctor.o: tools/rdmasock/doctor.cpp \
 tools/rdmasock/commands.hpp
tools/rdmasock/commands.hpp:
