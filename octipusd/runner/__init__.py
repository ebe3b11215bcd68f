"""Process I/O of vendor CLIs (`process`) and executable resolution (`executables`)."""
