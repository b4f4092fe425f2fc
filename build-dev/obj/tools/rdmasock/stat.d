build-dev/obj/tools/rdmasock/stat.o: tools/rdmasock/stat.cpp \
 tools/rdmasock/commands.hpp
tools/rdmasock/commands.hpp:
