"""Tests of atoll.interop (a package, so that the Spark fixtures below are torn down when these tests end)."""
