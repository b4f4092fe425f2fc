build-dev/obj/tools/rdmasock/run.o: tools/rdmasock/run.cpp \
 tools/rdmasock/commands.hpp
tools/rdmasock/commands.hpp:
