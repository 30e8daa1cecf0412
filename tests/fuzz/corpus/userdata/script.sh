#!/bin/sh
echo once per instance
