// Placeholder translation unit: the interposers arrive with the shim issue.
namespace rdmasock { int shim_version() { return 1; } }
