# The S3 server fixture (`s3_server`): started once per session by the tests that ask for it.
pytest_plugins = ["s3_server"]
